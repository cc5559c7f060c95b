#!/usr/bin/env bash
# Usage: fuzz/run.sh SECONDS
# Builds the bundle reader fuzzer in build-fuzz/ (clang-14, ninja, ccache),
# writes a seed corpus of valid bundles and fuzzes for SECONDS. Exits
# non-zero if the fuzzer finds a crash; reproducers land in build-fuzz/crashes/.
set -euo pipefail
secs=${1:?usage: fuzz/run.sh SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-fuzz"
mkdir -p "$build"
echo '*' > "$build/.gitignore"  # keep build output out of version control

if [[ ! -f "$build/build.ninja" ]]; then
  CXX=${CXX:-clang++-14} cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCACHE_FUZZ=ON -DKCACHE_BUILD_TESTS=OFF
fi
ninja -C "$build" -j"${JOBS:-2}" bundle_reader_fuzz bundle_seed_gen

corpus="$build/corpus"
crashes="$build/crashes"
mkdir -p "$corpus" "$crashes"
"$build/fuzz/bundle_seed_gen" "$corpus"

"$build/fuzz/bundle_reader_fuzz" "$corpus" \
  -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$crashes/" -print_final_stats=1
