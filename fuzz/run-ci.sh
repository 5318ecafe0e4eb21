#!/usr/bin/env bash
# Time-boxed fuzz smoke run: every target for SECONDS seconds (default 60), starting from the
# checked-in seeds. Fails on the first crash, leak, timeout or OOM; libFuzzer leaves the input
# in fuzz/artifacts/<target>/.
#
# Usage: fuzz/run-ci.sh [SECONDS] [TARGET...]
set -euo pipefail

seconds="${1:-60}"
shift || true
cd "$(dirname "$0")"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# One build for all targets, so the per-target time box is spent fuzzing, not compiling.
cargo +nightly fuzz build

for t in "${targets[@]}"; do
    # Seeds are copied into the (gitignored) corpus so new inputs found by the run never end up
    # in the checked-in seed directory.
    mkdir -p "corpus/$t"
    if [ -d "seeds/$t" ]; then
        cp -n "seeds/$t"/* "corpus/$t"/ 2>/dev/null || true
    fi
    echo "=== fuzzing $t for ${seconds}s"
    # -timeout: a single input taking longer than 10 s counts as a hang (a decoder looping).
    # -rss_limit_mb: a lying length field must not make us allocate gigabytes.
    cargo +nightly fuzz run "$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
done
echo "=== all ${#targets[@]} targets ran ${seconds}s without a crash"
